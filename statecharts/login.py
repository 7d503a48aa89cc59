"""``zread login --stdio``: region, browser authorization, model choice, saved account.

Owns: the login vm and its flow: select_region, init_flow, open_browser, waiting,
select_model, saving, then done or error. ``--custom`` and the ``__use_own_key__``
region end at once with ``wants_llm_provider_editor:true`` (and the ``username`` of
whoever is already logged in: empty when nobody is). The simulated user
approves in the browser after the ``authorize`` delay unless a scenario's
``authorization`` failure withholds it (``timeout = true``: auth_timeout runs out) or
denies it (its ``error``). With ``[world.login] approver = "control"`` and a control
peer attached, the peer approves instead: the driver asks for an
:class:`~simulator.core.effects.AskApproval` and the runner delivers ``_answered``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlencode

import msgspec

from simulator.core.command import Answer, Examples, Flag
from simulator.core.driver import Driver, Flags, InvalidParams
from simulator.core.effects import AskApproval, CancelApproval, SaveLogin

if TYPE_CHECKING:
    from collections.abc import Mapping

    from transitions import EventData


SUMMARY = "Login flow: sign in and choose a model"
HELP = """Login flow: sign in to Zread in the browser, then choose a model.

With --custom, use your own LLM provider instead."""
ABOUT = (
    "Logs in: after `select_region` the browser flow runs on timers until the "
    "authorisation comes (or expires), then `select_model` and the saving of the "
    "credentials."
)


class LoginFlags(Flags, frozen=True):
    """``zread login``'s flags."""

    custom: Annotated[bool, Flag("--custom", help="use your own LLM provider and API key")] = False


EXAMPLES = Examples(
    flags=((), ("--custom",)),
    scenarios={
        "approved-by-peer": '[world.login]\napprover = "control"\n',
        "flow-fails": '[[failures]]\npoint = "init_flow"\n',
        "authorization-denied": '[[failures]]\npoint = "authorization"\n',
        "save-fails": '[[failures]]\npoint = "save"\nerror = "write login.json: disk full"\n',
    },
)


ANSWERS = frozenset({"select_region", "select_model"})
"""The gates :func:`answer` answers: it is asked only when an event offers one."""


def answer(waiting: list[str], vm: Mapping[str, Any], memory: dict[str, Any]) -> Answer:
    """A sensible client: the global region, then the first model offered."""
    if "select_region" in waiting:
        return ("select_region", {"region": "global"})
    if "select_model" in waiting:
        return ("select_model", {"model": vm["avail_models"][0]})
    return None


OWN_KEY = "__use_own_key__"
"""The region that means "I bring my own LLM key": hand over to the config editor."""


class LoginVM(msgspec.Struct):
    state: str = ""
    authorize_url: str | msgspec.UnsetType = msgspec.UNSET
    auth_timeout: int | msgspec.UnsetType = msgspec.UNSET
    browser_warn: str = ""
    username: str | msgspec.UnsetType = msgspec.UNSET
    avail_models: list[str] | msgspec.UnsetType = msgspec.UNSET
    selected_model: str = ""
    error: str = ""
    wants_llm_provider_editor: bool = False


class RegionParams(msgspec.Struct):
    region: str


class ModelParams(msgspec.Struct):
    model: str


class LoginModel(Driver):
    flags: LoginFlags
    vm_type = LoginVM
    vm: LoginVM
    region = ""
    withheld = False
    asked_peer = False
    step_error = ""
    """Why the step that just ended failed (the vm.error to show), or ``""``."""

    def custom_requested(self, _: EventData) -> bool:
        return self.flags.custom

    def own_key(self, event: EventData) -> bool:
        return bool(event.kwargs["params"].region == OWN_KEY)

    def hand_over(self, _: EventData) -> None:
        self.vm.wants_llm_provider_editor = True

    def region_examples(self) -> list[dict[str, Any]]:
        """A region of the world's (or ``cn``), and the own-key choice."""
        regions = self.rt.scenario.world.login.regions or ["cn"]
        return [{"region": regions[0]}, {"region": OWN_KEY}]

    def check_region(self, params: RegionParams) -> None:
        allowed = self.rt.scenario.world.login.regions
        if not params.region:
            raise InvalidParams("region must not be empty")
        if allowed and params.region not in allowed and params.region != OWN_KEY:
            raise InvalidParams(f"unknown region {params.region!r} (one of {', '.join(allowed)})")

    def choose_region(self, event: EventData) -> None:
        self.region = event.kwargs["params"].region

    def start_flow(self, _: EventData) -> None:
        failure = self.rt.failure("init_flow")
        if failure is not None:
            self.step_error = failure.error or "start login flow: service unavailable"

    def step_failed(self, _: EventData) -> bool:
        return bool(self.step_error)

    def show_failure(self, _: EventData) -> None:
        self.vm.error = self.step_error

    def open_browser(self, _: EventData) -> None:
        login = self.rt.scenario.world.login
        nonce = f"{self.rt.rng.getrandbits(64):016x}"
        query = urlencode(
            {
                "client_id": "zread-cli",
                "region": self.region,
                "response_type": "code",
                "state": nonce,
                "redirect_uri": "http://127.0.0.1:53682/callback",
            }
        )
        self.vm.authorize_url = f"{login.authorize_url}?{query}"
        if not self.rt.scenario.world.browser_opens:
            self.vm.browser_warn = "could not open a browser; open the URL above to log in"

    def wait(self, _: EventData) -> None:
        login = self.rt.scenario.world.login
        self.vm.auth_timeout = round(login.auth_timeout * 1e9)
        if login.approver == "control" and self.rt.peer_attached:
            self.asked_peer = True
            self.rt.effect(AskApproval(str(self.vm.authorize_url), self.vm.auth_timeout))

    def stop_waiting(self, _: EventData | None) -> None:
        if self.asked_peer:
            self.asked_peer = False
            self.rt.effect(CancelApproval())

    def on_quit(self) -> None:
        self.stop_waiting(None)

    def peer_approved(self, event: EventData) -> bool:
        return bool(event.kwargs["approve"])

    def peer_denied(self, event: EventData) -> None:
        self.vm.error = event.kwargs["reason"] or "authorization denied"

    def decide_authorization(self, _: EventData) -> None:
        if self.asked_peer:  # the control peer decides, not the simulated user
            self.withheld = True
            return
        failure = self.rt.failure("authorization")
        self.withheld = failure is not None
        if failure is not None and not failure.timeout:
            self.step_error = failure.error or "authorization denied"

    def authorization_withheld(self, _: EventData) -> bool:
        return self.withheld

    def timed_out(self, _: EventData) -> None:
        self.vm.error = "authorization timed out"

    def offer_models(self, _: EventData) -> None:
        self.vm.authorize_url = msgspec.UNSET
        self.vm.auth_timeout = msgspec.UNSET
        self.vm.avail_models = list(self.rt.scenario.world.login.models)

    def model_examples(self) -> list[dict[str, Any]]:
        """The first model on offer."""
        return [{"model": model} for model in self.rt.scenario.world.login.models[:1]]

    def check_model(self, params: ModelParams) -> None:
        models = self.rt.scenario.world.login.models
        if params.model not in models:
            raise InvalidParams(f"unknown model {params.model!r} (one of {', '.join(models)})")

    def choose_model(self, event: EventData) -> None:
        self.vm.selected_model = event.kwargs["params"].model
        self.vm.avail_models = msgspec.UNSET

    def save_credentials(self, _: EventData) -> None:
        failure = self.rt.failure("save")
        if failure is not None:
            self.step_error = failure.error or "save credentials: permission denied"

    def finish(self, _: EventData) -> None:
        """``username`` names who is logged in: the account the flow just logged in, or,
        when the user brings their own key (no flow), the account already logged in,
        if any; with nobody it is empty (present, as in every done event)."""
        account = self.rt.scenario.world.account
        if self.region:
            self.vm.username = account.username
            self.rt.effect(SaveLogin(account.username, self.region, self.vm.selected_model))
        else:
            self.vm.username = account.username if account.logged_in else ""

    def clear_flow(self, _: EventData) -> None:
        self.vm.authorize_url = msgspec.UNSET
        self.vm.auth_timeout = msgspec.UNSET
        self.vm.avail_models = msgspec.UNSET


CHART = {
    "name": "login",
    "writes": "home",  # login.json: HOME is checked writable before the first event
    "model": "LoginModel",
    "flags": "LoginFlags",
    "timing": {
        "init_flow": {"uniform": [0.2, 0.4]},
        "open_browser": {"uniform": [0.2, 0.3]},
        "authorize": {"uniform": [1.0, 2.0]},
        "save_login": {"uniform": [0.2, 0.4]},
    },
    "failures": ["init_flow", "authorization", "save"],
    "initial": "starting",
    "states": [
        {"name": "starting"},
        {"name": "select_region", "waiting_for": ["select_region", "quit"]},
        {"name": "init_flow", "timers": [{"after": "init_flow", "trigger": "_flow_ready"}]},
        {
            "name": "open_browser",
            "on_enter": "open_browser",
            "timers": [{"after": "open_browser", "trigger": "_browser_opened"}],
        },
        {
            "name": "waiting",
            "on_enter": "wait",
            "on_exit": "stop_waiting",
            "timers": [
                {"after": "authorize", "trigger": "_authorized"},
                {"after": "world.login.auth_timeout", "trigger": "_expired"},
            ],
        },
        {
            "name": "select_model",
            "on_enter": "offer_models",
            "waiting_for": ["select_model", "quit"],
        },
        {"name": "saving", "timers": [{"after": "save_login", "trigger": "_saved"}]},
        {"name": "done", "on_enter": "finish", "terminal": True},
        {"name": "error", "on_enter": "clear_flow", "terminal": True},
    ],
    "transitions": [
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "done",
            "conditions": "custom_requested",
            "before": "hand_over",
        },
        {"trigger": "_start", "source": "starting", "dest": "select_region"},
        {
            "trigger": "select_region",
            "source": "select_region",
            "dest": "done",
            "conditions": "own_key",
            "before": "hand_over",
        },
        {
            "trigger": "select_region",
            "source": "select_region",
            "dest": "init_flow",
            "before": "choose_region",
        },
        {
            "trigger": "_flow_ready",
            "source": "init_flow",
            "dest": "error",
            "prepare": "start_flow",
            "conditions": "step_failed",
            "before": "show_failure",
        },
        {
            "trigger": "_flow_ready",
            "source": "init_flow",
            "dest": "open_browser",
            "prepare": "start_flow",
        },
        {"trigger": "_browser_opened", "source": "open_browser", "dest": "waiting"},
        {
            "trigger": "_authorized",
            "source": "waiting",
            "dest": "error",
            "prepare": "decide_authorization",
            "conditions": "step_failed",
            "before": "show_failure",
        },
        {
            "trigger": "_authorized",
            "source": "waiting",
            "dest": "select_model",
            "prepare": "decide_authorization",
            "unless": "authorization_withheld",
        },
        {"trigger": "_expired", "source": "waiting", "dest": "error", "before": "timed_out"},
        {
            "trigger": "_answered",
            "source": "waiting",
            "dest": "select_model",
            "conditions": "peer_approved",
        },
        {"trigger": "_answered", "source": "waiting", "dest": "error", "before": "peer_denied"},
        {
            "trigger": "select_model",
            "source": "select_model",
            "dest": "saving",
            "before": "choose_model",
        },
        {
            "trigger": "_saved",
            "source": "saving",
            "dest": "error",
            "prepare": "save_credentials",
            "conditions": "step_failed",
            "before": "show_failure",
        },
        {"trigger": "_saved", "source": "saving", "dest": "done", "prepare": "save_credentials"},
    ],
    "commands": {
        "select_region": {
            "params": "RegionParams",
            "check": "check_region",
            "examples": "region_examples",
        },
        "select_model": {
            "params": "ModelParams",
            "check": "check_model",
            "examples": "model_examples",
        },
    },
}
