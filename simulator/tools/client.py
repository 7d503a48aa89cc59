"""A reference client: the answer a sensible zread client gives at every gate.

Owns: :class:`ReferenceClient`, whose ``answer`` looks at one event and returns the
command line a client that wants each command to finish would send, or None when the
event asks for nothing (``waiting_for`` without a gate of its own, or done). It
retries each failed page once and the catalog once, then gives up (``skip_all``,
``quit``), so a run always ends; in ``config`` it changes one field, then saves. The
load runner drives every session with one; tests use it to script whole runs.

Must not: do I/O; it reads the events it is given.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ReferenceClient", "command_line"]


def command_line(type: str, **params: Any) -> bytes:
    """One command line, newline included."""
    return json.dumps({"type": type, "params": params}, separators=(",", ":")).encode() + b"\n"


class ReferenceClient:
    """Answers every gate sensibly; retries each failed page and the catalog once."""

    def __init__(self) -> None:
        self.retried: set[int] = set()
        self.catalog_retries = 0
        self.config_edited = False

    def answer(self, event: dict[str, Any]) -> bytes | None:
        """The command for this event's gate, or None when it asks for nothing."""
        if event.get("done") or event.get("error"):
            return None
        waiting = event.get("waiting_for") or []
        vm = event.get("vm") or {}
        if "select_action" in waiting:
            scenario = vm.get("select_action", {}).get("scenario")
            action = "resume" if scenario == "has_draft" else "generate"
            return command_line("select_action", action=action)
        if "retry_catalog" in waiting:
            self.catalog_retries += 1
            return command_line("retry_catalog" if self.catalog_retries == 1 else "quit")
        if "retry" in waiting:
            tasks = vm.get("pages", {}).get("tasks", [])
            failed = [
                t["id"] for t in tasks if t["state"] == "failed" and t["id"] not in self.retried
            ]
            if not failed:
                return command_line("skip_all")
            self.retried.add(failed[0])
            return command_line("retry", task_id=failed[0])
        if "select_version" in waiting:
            if vm.get("has_current"):
                return command_line("select_version", current=True)
            return command_line("select_version", wiki_id=vm["versions"][-1]["id"])
        if "select_region" in waiting:
            return command_line("select_region", region="global")
        if "select_model" in waiting:
            return command_line("select_model", model=vm["avail_models"][0])
        if "download" in waiting:
            return command_line("download")
        if "restart" in waiting:
            return command_line("restart")
        if "update_fields" in waiting:  # config: change one field, then save
            if self.config_edited:
                return command_line("save")
            self.config_edited = True
            return command_line("update_fields", fields={"language": "de"})
        if waiting == ["quit"] and vm.get("state") == "serving":
            return command_line("quit")
        return None
