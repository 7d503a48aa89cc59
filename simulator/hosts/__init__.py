"""Hosts: what a runner does for a session in the outside world.

Owns: performing effects (:mod:`~simulator.hosts.effects`), the world kept across
commands in zread's own files (:mod:`~simulator.hosts.files`, the store, with
:mod:`~simulator.hosts.userfiles` for HOME, :mod:`~simulator.hosts.dirfd` for a
project's directories, :mod:`~simulator.hosts.pages` for what a page cites and
:mod:`~simulator.hosts.disksite` for what browse serves from disk; their bytes are
:mod:`simulator.formats`'), the wiki's HTTP server
(:mod:`~simulator.hosts.wikiserver`: its HTML in :mod:`~simulator.hosts.wikihtml`, its
connections in :mod:`~simulator.hosts.httpserver`, each request in
:mod:`~simulator.hosts.httprequest`) and the ``zread`` executable writer
(:mod:`~simulator.hosts.executable`).

Must not: import runners or tools; a session never imports a host.
"""
