"""Hosts: what a runner does for a session in the outside world.

Owns: performing effects (:mod:`~simulator.hosts.effects`), the world kept across
commands (:mod:`~simulator.hosts.home`, the store), the wiki's HTTP server
(:mod:`~simulator.hosts.wikiserver`) and the ``zread`` executable writer
(:mod:`~simulator.hosts.executable`).

Must not: import runners or tools; a session never imports a host.
"""
