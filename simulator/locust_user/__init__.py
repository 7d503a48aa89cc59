"""What :mod:`simulator.locust` runs for each Locust user, kept apart from Locust.

:mod:`simulator.locust_user.drive` drives one session on gevent and reports its figures
to a callback; :mod:`simulator.locust` (the only module that imports Locust) hands them
to Locust. This package must not import Locust, and defines nothing here.
"""
