"""What :mod:`simulator.locust` runs for each Locust user, kept apart from Locust.

:mod:`simulator.locust_user.drive` says what a session runs and reports (its figures to
a callback) and runs one as a real process; :mod:`simulator.locust_user.inprocess` runs
a process's in-process sessions on one hub; :mod:`simulator.locust_user.event` reads an
event as far as it is looked at; :mod:`simulator.locust_user.memory` keeps the memory
figure. :mod:`simulator.locust` (the only module that imports Locust) hands the figures
to Locust. This package must not import Locust, and defines nothing here.
"""
