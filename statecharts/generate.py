"""``zread generate --stdio``: the select_action gate, the catalog, the pages, the gates.

Owns: the generate vm and its flow.

- ``select_action`` offers what the world allows: empty → generate, cancel; has_wiki →
  generate, browse, cancel; has_draft → resume, clear, cancel. ``--yes`` skips it;
  ``--draft resume|clear|cancel`` answers it for a draft. ``--yes`` alone ignores a
  draft and starts over (the gate says ``empty``), as zread 0.2.13 does. Resuming a
  draft whose id is already a version's ends in ``error``; resuming one read from disk
  with every page written (a run killed before its commit) ends ``done`` at once.
- The catalog: a simulated agent calls tools (``tool_name`` changes at each
  ``catalog_step``); a failed attempt starts again, counted in ``auto_retry`` (the
  automatic retries, as ``retry_count`` counts a page's), until ``max_retries``
  automatic retries are spent, then ``status`` is ``error`` and the ``retry_catalog``
  gate opens.
- The pages, ids 1..N in catalog order: at most ``max_concurrent`` running; a failed
  attempt with retries left waits in ``retry_pending`` for a ``page_retry`` backoff; with
  none left it is ``failed``. When nothing is pending or running, any failure opens the
  retry gate (``retry`` by task_id, ``skip_all``), else the run is ``done``. With
  ``--skip-failed`` the driver answers the gate itself: the page event that would open
  it ends the run instead (no event offers ``retry`` or ``skip_all``).
- The final event shows nothing still at work: a ``cancel`` sets the running and
  retry_pending pages back to ``pending`` (not written; a resume runs them) and a
  catalog being made back to ``idle``; a broken repository ends with the catalog in
  ``error``. ``quit`` alone shows the vm as it stood (the session's rule).

``max_concurrent`` and ``max_retries`` come from the world's config, the values
``zread config`` shows. Without a logged-in account the first event is the terminal
``error`` state.

What a run leaves behind is an effect (a store writes it into the project's
``.zread/wiki``): the catalog made is a :class:`~simulator.core.effects.CatalogReady`
(a new draft, or the resumed one going on), each finished page a
:class:`~simulator.core.effects.PageWritten`; a run that ends in ``done`` after its
pages ran (``skip_all`` included) is a :class:`~simulator.core.effects.WikiGenerated`;
a ``cancel`` while running, or a ``quit`` while running or at a gate, is a
:class:`~simulator.core.effects.DraftLeft` with the pages done so far.

Over 400 lines, on purpose: this is zread's largest command, and a command is its
module (its face, vm, model and chart together, so adding or changing a command is
one file). The generic pieces are elsewhere: the spliced task list in
``simulator.core.spliced``, the wiki data in ``simulator.scenario.wiki``.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from simulator.core.command import Answer, Examples, Flag
from simulator.core.driver import Driver, Flags, InvalidParams, Runtime
from simulator.core.effects import CatalogReady, DraftLeft, PageWritten, WikiGenerated
from simulator.core.spliced import SplicedList
from simulator.scenario import wiki, wikiwords

if TYPE_CHECKING:
    from collections.abc import Mapping

    from transitions import EventData


SUMMARY = "Generate wiki documentation for the current repository"
HELP = """Generate wiki documentation for the current repository.

Writes a catalog, then each page, into .zread/wiki/drafts/ in the project; when it
is done the draft becomes .zread/wiki/versions/<id> and .zread/wiki/current names it."""
ABOUT = (
    "Generates the wiki: start-up resumes a draft, asks `select_action` or "
    "starts fresh; the catalog and every page run on timers, and a failed page opens "
    "the retry gate."
)


class GenerateFlags(Flags, frozen=True):
    """``zread generate``'s flags; ``draft_action`` is ``--draft`` (alias ``--draft-action``)."""

    yes: Annotated[bool, Flag("-y", "--yes", help="start at once, without asking what to do")] = (
        False
    )
    draft_action: Annotated[
        str,
        Flag(
            "--draft",
            "--draft-action",
            metavar="string",
            choices=("resume", "clear", "cancel"),
            help="what to do with an unfinished draft: resume, clear or cancel",
        ),
    ] = ""
    skip_failed: Annotated[
        bool,
        Flag("--skip-failed", help="skip the pages that failed instead of waiting for a retry"),
    ] = False


EXAMPLES = Examples(
    flags=(
        (),
        ("-y",),
        ("-y", "--skip-failed"),
        ("--draft", "resume"),
        ("--draft", "clear"),
        ("--draft", "cancel"),
    ),
    scenarios={
        "logged-out": "[world.account]\nlogged_in = false\n",
        "broken-repository": '[[failures]]\npoint = "repository"\n'
        'error = "open repository: no .git here"\n',
        "draft-already-a-version": 'extends = "draft"\n[world.draft]\nid = "2025-01-01-000000"\n'
        '[[world.wikis]]\nid = "2025-01-01-000000"\n',
        "draft-complete": '[[world.project.pages]]\ntitle = "A"\n[[world.project.pages]]\n'
        'title = "B"\n[world.draft]\nid = "2025-01-01-000000"\nfinished = ["1-a", "2-b"]\n',
    },
)


ANSWERS = frozenset({"select_action", "retry_catalog", "retry"})
"""The gates :func:`answer` answers: it is asked only when an event offers one."""


def answer(waiting: list[str], vm: Mapping[str, Any], memory: dict[str, Any]) -> Answer:
    """A sensible client: resume a draft, else generate; retry each failed page and the
    catalog once, then give up (``skip_all``, ``quit``), so a run always ends."""
    if "select_action" in waiting:
        scenario = vm.get("select_action", {}).get("scenario")
        return ("select_action", {"action": "resume" if scenario == "has_draft" else "generate"})
    if "retry_catalog" in waiting:
        memory["catalog_retries"] = memory.get("catalog_retries", 0) + 1
        return ("retry_catalog" if memory["catalog_retries"] == 1 else "quit", {})
    if "retry" in waiting:
        retried: set[int] = memory.setdefault("retried", set())
        tasks = vm.get("pages", {}).get("tasks", [])
        failed = [t["id"] for t in tasks if t["state"] == "failed" and t["id"] not in retried]
        if not failed:
            return ("skip_all", {})
        retried.add(failed[0])
        return ("retry", {"task_id": failed[0]})
    return None


ACTIONS: dict[str, tuple[str, ...]] = {
    "empty": ("generate", "cancel"),
    "has_wiki": ("generate", "browse", "cancel"),
    "has_draft": ("resume", "clear", "cancel"),
}
"""The actions select_action allows, by the gate's scenario."""

_NEXT_ACTION = {"empty": "generate", "has_wiki": "browse", "has_draft": ""}

TOOLS: tuple[str, ...] = (
    "list_dir",
    "read_file",
    "search_code",
    "read_file",
    "list_dir",
    "write_catalog",
)
"""The tools the simulated agent calls, in order, during one catalog attempt."""


TaskState = Literal["pending", "running", "retry_pending", "done", "failed", "resumed"]
"""What ``vm.pages.tasks[].state`` may say."""

CatalogStatus = Literal["idle", "running", "done", "resumed", "error"]
"""What ``vm.catalog.status`` may say."""


class SelectAction(msgspec.Struct):
    scenario: str = ""
    wiki_date: str | msgspec.UnsetType = msgspec.UNSET
    draft_done: int = 0
    draft_total: int = 0
    next_action: str = ""


class Catalog(msgspec.Struct):
    status: CatalogStatus = "idle"
    tool_name: str = ""
    error: str = ""
    auto_retry: int = 0


class Task(msgspec.Struct, gc=False):  # ints and strings only: no cycles to collect
    id: int
    title: str
    slug: str
    state: TaskState = "pending"
    retry_count: int = 0
    max_retries: int = 0
    error: str = ""


class TaskList(SplicedList[Task]):
    """The page tasks: a :class:`~simulator.core.spliced.SplicedList` (each event
    re-encodes only the tasks that changed), a task changed through :meth:`task`."""

    __slots__ = ()

    def task(self, task_id: int) -> Task:
        """The task ``task_id`` (1-based), marked as changed."""
        return self.edit(task_id - 1)


class Pages(msgspec.Struct):
    tasks: TaskList = msgspec.field(default_factory=TaskList)
    done: int = 0
    total: int = 0
    waiting_retry: bool = False


class GenerateVM(msgspec.Struct):
    state: str = ""
    max_retries: int = 0
    select_action: SelectAction = msgspec.field(default_factory=SelectAction)
    catalog: Catalog = msgspec.field(default_factory=Catalog)
    pages: Pages = msgspec.field(default_factory=Pages)
    done_total: int = 0
    error: str = ""


class ActionParams(msgspec.Struct):
    action: str


class RetryParams(msgspec.Struct):
    task_id: int


class GenerateModel(Driver):
    flags: GenerateFlags
    vm_type = GenerateVM
    vm: GenerateVM

    def __init__(self, rt: Runtime) -> None:
        super().__init__(rt)
        world = rt.scenario.world
        self.max_concurrent: int = world.config.max_concurrent
        self.max_retries: int = world.config.max_retries
        self.vm.max_retries = self.max_retries
        self.language = wikiwords.wiki_language(world.config.language)
        self._pages: tuple[wiki.Page, ...] | None = None  # drawn when first needed
        draft = world.draft
        ignored = draft is not None and self.flags.yes and not self.flags.draft_action
        if ignored:
            draft = None  # zread 0.2.13: -y alone ignores a draft and starts over
        self.draft = draft
        self.draft_done = 0
        if draft is not None:
            self.draft_done = (
                sum(1 for page in self.pages if page.slug in draft.finished)
                if draft.finished
                else min(draft.done, len(self.pages) - 1)
            )
        self.catalog_step = 0
        self.catalog_round_failures = 0
        self.catalog_attempts = 0
        self.repository_checked = False
        self.repository_error = ""  # set when the repository check failed: the run ends
        self.attempts: list[int] = []  # by task id, made with the tasks
        # Page accounting kept incrementally, so an event costs O(1) in the page count:
        self.waiting: list[int] = []  # heap of task ids that want a slot, lowest first
        self.running = 0
        self.unsettled = 0  # pending, running or retry_pending
        self.failed = 0
        gate = self.vm.select_action
        if ignored:
            gate.scenario = "empty"  # what zread reports then, wikis or not
        elif draft is not None:
            gate.scenario = "has_draft"
            gate.draft_done, gate.draft_total = self.draft_done, len(self.pages)
        elif world.wikis:
            gate.scenario = "has_wiki"
            gate.wiki_date = wiki.shown_date(world, rt.seed)
        else:
            gate.scenario = "empty"
        gate.next_action = _NEXT_ACTION[gate.scenario]

    # -- start and select_action -----------------------------------------------------

    def _has_draft(self) -> bool:
        return self.vm.select_action.scenario == "has_draft"

    def logged_in(self, _: EventData) -> bool:
        return self.rt.scenario.world.account.logged_in

    def show_not_logged_in(self, _: EventData) -> None:
        self.vm.error = "not logged in: run zread login first"

    def draft_cancelled(self, _: EventData) -> bool:
        return self._has_draft() and self.flags.draft_action == "cancel"

    def draft_resumed(self, _: EventData) -> bool:
        return self._has_draft() and self.flags.draft_action == "resume"

    def draft_is_a_version(self, _: EventData) -> bool:
        """The draft's id is already a version's: zread ends such a resume in error."""
        draft = self.draft
        wikis = self.rt.scenario.world.wikis
        return draft is not None and bool(draft.id) and any(w.id == draft.id for w in wikis)

    def draft_complete(self, _: EventData) -> bool:
        """Every page of a draft read from disk is written (a run killed between its last
        page and its commit): a resume has nothing to run, and commits the draft at once.
        (A scenario's ``done`` count leaves one page to run at least.)"""
        draft = self.draft
        return draft is not None and bool(draft.finished) and self.draft_done == len(self.pages)

    def show_draft_conflict(self, _: EventData) -> None:
        assert self.draft is not None
        self.vm.error = f"draft {self.draft.id} already exists as version {self.draft.id}"

    def starts_unasked(self, _: EventData) -> bool:
        flags = self.flags
        if self._has_draft():
            return flags.draft_action == "clear"
        return flags.yes

    def action_examples(self) -> list[dict[str, Any]]:
        """Every action the gate allows."""
        return [{"action": action} for action in ACTIONS[self.vm.select_action.scenario]]

    def check_action(self, params: ActionParams) -> None:
        allowed = ACTIONS[self.vm.select_action.scenario]
        if params.action not in allowed:
            raise InvalidParams(
                f"action {params.action!r} not allowed for {self.vm.select_action.scenario}"
                f" (one of {', '.join(allowed)})"
            )

    def chose_fresh(self, event: EventData) -> bool:
        return bool(event.kwargs["params"].action in ("generate", "clear"))

    def chose_resume(self, event: EventData) -> bool:
        return bool(event.kwargs["params"].action == "resume")

    # -- the catalog -------------------------------------------------------------------

    def start_catalog(self, _: EventData) -> None:
        self.vm.catalog.status = "running"
        self.vm.catalog.tool_name = ""
        self.catalog_step = 0
        self.catalog_round_failures = 0

    def step_catalog(self, _: EventData) -> None:
        """One catalog step; the first one checks the repository, and a broken one ends
        the run before the catalog goes on."""
        if not self.repository_checked:
            self.repository_checked = True
            failure = self.rt.failure("repository")
            if failure is not None:
                self.repository_error = failure.error or "open repository: not a git repository"
                return
        catalog = self.vm.catalog
        self.catalog_step += 1
        if self.catalog_step <= len(TOOLS):
            catalog.tool_name = TOOLS[self.catalog_step - 1]
            return
        self.catalog_step = 0
        catalog.tool_name = ""
        self.catalog_attempts += 1
        failure = self.rt.failure("catalog", attempt=self.catalog_attempts)
        if failure is None:
            catalog.status, catalog.error = "done", ""
            self._make_tasks(resumed=0)
            self.rt.effect(CatalogReady(self.pages, self.language))
            self.pages = ()  # the tasks say the rest: one catalog per session, not two
            return
        catalog.error = failure.error or "catalog: the model returned an invalid catalog"
        self.catalog_round_failures += 1
        if self.catalog_round_failures > self.max_retries:
            catalog.status = "error"
        else:
            catalog.auto_retry += 1  # the automatic retry that starts now

    def catalog_failed(self, _: EventData) -> bool:
        return self.vm.catalog.status == "error"

    def catalog_ready(self, _: EventData) -> bool:
        return self.vm.catalog.status == "done"

    def resume_draft(self, _: EventData) -> None:
        self.vm.catalog.status = "resumed"
        self._make_tasks(resumed=self.draft_done)
        self.rt.effect(CatalogReady(self.pages, self.language, resumed=True))
        self.pages = ()  # the tasks say the rest

    @property
    def pages(self) -> tuple[wiki.Page, ...]:
        """The catalog's pages, drawn from the seed when first asked for (when the
        catalog is made, or at start for a draft): a session that starts costs half as
        much, which is what many starting at once are short of."""
        if self._pages is None:
            self._pages = wiki.world_catalog(self.rt.scenario.world, self.rt.seed)
        return self._pages

    @pages.setter
    def pages(self, pages: tuple[wiki.Page, ...]) -> None:
        self._pages = pages

    def _make_tasks(self, resumed: int) -> None:
        tasks = [Task(p.id, p.title, p.slug, max_retries=self.max_retries) for p in self.pages]
        self.attempts = [0] * (len(tasks) + 1)  # by task id; a list is ~5x smaller
        finished = set(self.draft.finished) if resumed and self.draft is not None else set()
        for index, task in enumerate(tasks):
            if resumed and (task.slug in finished if finished else index < resumed):
                task.state = "resumed"
        self.vm.pages = Pages(tasks=TaskList(tasks), done=resumed, total=len(tasks))
        self.waiting = [task.id for task in tasks if task.state == "pending"]  # sorted: a heap
        self.unsettled = len(self.waiting)

    # -- the pages ---------------------------------------------------------------------

    def run_pages(self, _: EventData) -> None:
        self.vm.pages.waiting_retry = False
        self._fill_slots()

    def _fill_slots(self) -> None:
        tasks = self.vm.pages.tasks
        while self.running < self.max_concurrent and self.waiting:
            task = tasks.task(heapq.heappop(self.waiting))
            task.state = "running"
            task.error = ""
            self.running += 1
            self.rt.schedule("_page_done", "page", task_id=task.id)

    def finish_page(self, event: EventData) -> None:
        task = self.vm.pages.tasks.task(event.kwargs["task_id"])
        self.running -= 1
        self.attempts[task.id] += 1
        attempt = self.attempts[task.id]
        failure = self.rt.failure("page", target=task.id, attempt=attempt)
        if failure is None:
            task.state = "done"
            self.vm.pages.done += 1
            self.unsettled -= 1
            self.rt.effect(PageWritten(task.id))
        else:
            task.error = failure.error or f"page {task.slug}: the model request timed out"
            if task.retry_count < task.max_retries:
                task.state = "retry_pending"
                task.retry_count += 1
                self.rt.schedule("_retry_due", "page_retry", task_id=task.id)
            else:
                task.state = "failed"
                self.unsettled -= 1
                self.failed += 1
        self._fill_slots()

    def retry_due(self, event: EventData) -> None:
        task = self.vm.pages.tasks.task(event.kwargs["task_id"])
        task.state = "pending"
        heapq.heappush(self.waiting, task.id)
        self._fill_slots()

    def gate_needed(self, _: EventData) -> bool:
        return self.unsettled == 0 and self.failed > 0

    def skips_failed(self, _: EventData) -> bool:
        """``--skip-failed``: the driver answers the retry gate with skip_all itself."""
        return self.flags.skip_failed

    def all_done(self, _: EventData) -> bool:
        return self.unsettled == 0

    def open_gate(self, _: EventData) -> None:
        self.vm.pages.waiting_retry = True

    def retry_examples(self) -> list[dict[str, Any]]:
        """The first failed task."""
        failed = [t.id for t in self.vm.pages.tasks if t.state == "failed"]
        return [{"task_id": task_id} for task_id in failed[:1]]

    def check_retry(self, params: RetryParams) -> None:
        tasks = self.vm.pages.tasks
        if not 1 <= params.task_id <= len(tasks) or tasks[params.task_id - 1].state != "failed":
            raise InvalidParams(f"task {params.task_id} is not a failed task")

    def retry_page(self, event: EventData) -> None:
        task = self.vm.pages.tasks.task(event.kwargs["params"].task_id)
        task.retry_count = 0
        task.state = "pending"
        self.failed -= 1
        self.unsettled += 1
        heapq.heappush(self.waiting, task.id)

    # -- the end -----------------------------------------------------------------------

    def repository_broken(self, _: EventData) -> bool:
        return bool(self.repository_error)

    def show_repository_error(self, _: EventData) -> None:
        """The repository cannot be read: the catalog fails with the run."""
        self.vm.error = self.repository_error
        catalog = self.vm.catalog
        catalog.status, catalog.tool_name, catalog.error = "error", "", self.repository_error

    def finish(self, _: EventData) -> None:
        """The run is over (its last event): nothing is left at work in the vm. A page
        that was running or waiting for its retry is ``pending`` again (it was not
        written; a resume runs it), a catalog being made is ``idle`` (not made)."""
        pages = self.vm.pages
        pages.waiting_retry = False
        self.vm.done_total = pages.done
        catalog = self.vm.catalog
        if catalog.status == "running":
            catalog.status, catalog.tool_name = "idle", ""
        if self.unsettled:
            for task in pages.tasks:
                if task.state in ("running", "retry_pending"):
                    pages.tasks.task(task.id).state = "pending"
            self.running = 0

    def record_wiki(self, _: EventData) -> None:
        """The pages ran to the end (or the rest were skipped): a new wiki version."""
        pages = self.vm.pages
        self.rt.effect(WikiGenerated(pages_done=pages.done, pages_total=pages.total))

    def leave_draft(self, _: EventData | None = None) -> None:
        """Stopped while running: the pages done so far are a draft."""
        self.rt.effect(DraftLeft(self.vm.pages.done))

    def on_quit(self) -> None:
        if self.state in _LEAVES_DRAFT:
            self.leave_draft()


_RUN = "running"
_LEAVES_DRAFT = frozenset({"catalog", "catalog_error", "pages", "retry_gate"})
"""The chart states in which a quit leaves a draft behind."""
_PAGE_END = [
    # Most page events leave pages running: that transition is tried first.
    {
        "trigger": "_page_done",
        "source": "pages",
        "dest": None,
        "prepare": "finish_page",
        "unless": "all_done",
    },
    {
        "trigger": "_page_done",
        "source": "pages",
        "dest": "done",
        "prepare": "finish_page",
        "conditions": ["gate_needed", "skips_failed"],
        "before": "record_wiki",
    },
    {
        "trigger": "_page_done",
        "source": "pages",
        "dest": "retry_gate",
        "prepare": "finish_page",
        "conditions": "gate_needed",
    },
    {
        "trigger": "_page_done",
        "source": "pages",
        "dest": "done",
        "prepare": "finish_page",
        "before": "record_wiki",
    },
    {"trigger": "_retry_due", "source": "pages", "dest": None, "after": "retry_due"},
]

CHART = {
    "name": "generate",
    "project": True,  # reads and writes the project's .zread/wiki
    "writes": "project",  # checked writable before the first event; HOME only its log
    "model": "GenerateModel",
    "flags": "GenerateFlags",
    "timing": {
        "catalog_step": {"uniform": [0.15, 0.28]},
        "page": {"uniform": [0.6, 1.5]},
        "page_retry": {"uniform": [0.2, 0.5]},
    },
    "failures": ["repository", "catalog", "page"],
    "initial": "starting",
    "states": [
        {"name": "starting"},
        {"name": "select_action", "waiting_for": ["select_action", "cancel", "quit"]},
        {
            "name": "catalog",
            "vm_state": _RUN,
            "on_enter": "start_catalog",
            "waiting_for": ["quit", "cancel"],
            "timers": [{"after": "catalog_step", "trigger": "_catalog_step", "repeat": True}],
        },
        {"name": "catalog_error", "vm_state": _RUN, "waiting_for": ["quit", "retry_catalog"]},
        {
            "name": "pages",
            "vm_state": _RUN,
            "on_enter": "run_pages",
            "waiting_for": ["quit", "cancel"],
        },
        {
            "name": "retry_gate",
            "vm_state": _RUN,
            "on_enter": "open_gate",
            "waiting_for": ["quit", "retry", "skip_all"],
        },
        {"name": "done", "on_enter": "finish", "terminal": True},
        {"name": "error", "terminal": True},
    ],
    "transitions": [
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "error",
            "unless": "logged_in",
            "before": "show_not_logged_in",
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "done",
            "conditions": "draft_cancelled",
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "error",
            "conditions": ["draft_resumed", "draft_is_a_version"],
            "before": "show_draft_conflict",
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "done",
            "conditions": ["draft_resumed", "draft_complete"],
            "before": ["resume_draft", "record_wiki"],
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "pages",
            "conditions": "draft_resumed",
            "before": "resume_draft",
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "catalog",
            "conditions": "starts_unasked",
        },
        {"trigger": "_start", "source": "starting", "dest": "select_action"},
        {
            "trigger": "select_action",
            "source": "select_action",
            "dest": "catalog",
            "conditions": "chose_fresh",
        },
        {
            "trigger": "select_action",
            "source": "select_action",
            "dest": "error",
            "conditions": ["chose_resume", "draft_is_a_version"],
            "before": "show_draft_conflict",
        },
        {
            "trigger": "select_action",
            "source": "select_action",
            "dest": "done",
            "conditions": ["chose_resume", "draft_complete"],
            "before": ["resume_draft", "record_wiki"],
        },
        {
            "trigger": "select_action",
            "source": "select_action",
            "dest": "pages",
            "conditions": "chose_resume",
            "before": "resume_draft",
        },
        {"trigger": "select_action", "source": "select_action", "dest": "done"},
        {"trigger": "cancel", "source": "select_action", "dest": "done"},
        {
            "trigger": "cancel",
            "source": ["catalog", "pages"],
            "dest": "done",
            "before": "leave_draft",
        },
        {
            "trigger": "_catalog_step",
            "source": "catalog",
            "dest": "error",
            "prepare": "step_catalog",
            "conditions": "repository_broken",
            "before": "show_repository_error",
        },
        {
            "trigger": "_catalog_step",
            "source": "catalog",
            "dest": "catalog_error",
            "prepare": "step_catalog",
            "conditions": "catalog_failed",
        },
        {
            "trigger": "_catalog_step",
            "source": "catalog",
            "dest": "pages",
            "prepare": "step_catalog",
            "conditions": "catalog_ready",
        },
        {"trigger": "_catalog_step", "source": "catalog", "dest": None, "prepare": "step_catalog"},
        {"trigger": "retry_catalog", "source": "catalog_error", "dest": "catalog"},
        *_PAGE_END,
        {
            "trigger": "retry",
            "source": "retry_gate",
            "dest": "pages",
            "before": "retry_page",
        },
        {"trigger": "skip_all", "source": "retry_gate", "dest": "done", "before": "record_wiki"},
    ],
    "commands": {
        "select_action": {
            "params": "ActionParams",
            "check": "check_action",
            "examples": "action_examples",
        },
        "cancel": {},
        "retry_catalog": {},
        "retry": {"params": "RetryParams", "check": "check_retry", "examples": "retry_examples"},
        "skip_all": {},
    },
}
