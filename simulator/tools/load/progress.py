"""What a user sees during a long load run: one progress bar on stderr, by tqdm.

Owns: :class:`ProgressBar`. With a count of sessions the bar runs over the sessions
finished (percent, rate and ETA); with only a duration, over its seconds. After the bar:
the sessions live, events per second and the p99 lateness of the newest tick. It is
drawn only on a terminal (``enabled=None``: when its stream is one), and only once the
run has begun (the first tick), so nothing is written before the run can be stopped.

tqdm, not a line of our own: it sizes the bar to the terminal, estimates the ETA and
redraws at a bounded rate, which a hand-written line would have to do again.

Must not: measure or drive anything; it is told what to show.
"""

from __future__ import annotations

from typing import IO, Any


class ProgressBar:
    """One bar on ``stream``; :meth:`show` after each tick, :meth:`close` at the end."""

    def __init__(
        self,
        stream: IO[str],
        *,
        sessions: int | None,
        duration: float | None,
        enabled: bool | None = None,
    ) -> None:
        self.stream = stream
        self.sessions = sessions
        self.duration = duration
        if enabled is None:
            isatty = getattr(stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._bar: Any = None

    def _open(self) -> Any:
        from tqdm import tqdm

        if self.sessions is not None:
            return tqdm(
                total=self.sessions,
                desc="sessions done",
                unit=" sessions",
                file=self.stream,
                dynamic_ncols=True,
                mininterval=0.25,
                disable=False,
            )
        return tqdm(
            total=self.duration,
            desc="0 sessions done",
            unit="s",
            bar_format="{desc} {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s "
            "[{elapsed}<{remaining}{postfix}]",
            file=self.stream,
            dynamic_ncols=True,
            mininterval=0.25,
            disable=False,
        )

    def show(self, finished: int, point: dict[str, Any]) -> None:
        """The sessions finished so far and the newest point of the time series."""
        if not self.enabled:
            return
        if self._bar is None:
            self._bar = self._open()
        bar = self._bar
        if self.sessions is not None:
            bar.n = min(finished, self.sessions)
        else:
            bar.n = min(float(point.get("t", 0.0)), float(self.duration or 0.0))
            bar.set_description_str(f"{finished:,} sessions done", refresh=False)
        p99 = point.get("p99_ms")
        late = f", p99 {p99:.1f} ms" if p99 is not None else ""
        bar.set_postfix_str(
            f"{point.get('live', 0):,} live, {point.get('events_per_s', 0):,.0f} events/s{late}",
            refresh=False,
        )
        bar.refresh()

    def update_to(self, finished: int, point: dict[str, Any]) -> None:
        """The last figures of the run, on a bar already drawn (none is started now)."""
        if self._bar is not None:
            self.show(finished, point)

    def close(self) -> None:
        """End the bar's line (if one was drawn)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
