"""Tools built on the simulator: the reference client, the remote admin client, load
tests and their plots.

Must not: be imported by the core, scenarios, runners or hosts.
"""
