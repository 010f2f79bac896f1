"""The ultragoal service: the one path the MCP tool, the CLI and in-process hooks take.

Every call names its operation, its caller's authority and (optionally) its session; the
service checks the input strictly (``inputs``), resolves the session (``sessions``) and
hands the operation its ``Context``. The MCP tool acts as ``agent`` only: user-only
operations are refused there with the command to present to the user, and the review
dispatch claim is the hook's. The CLI passes ``actor="user"`` only after the kernel's
terminal check and typed confirmation have passed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ithaca.kernel import clock
from ithaca.kernel.errors import NotFound, Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.ultragoal import (
    authority,
    contract,
    inputs,
    levers,
    lifecycle,
    objective,
    planning,
    records,
    review,
    story_runs,
    story_set,
    story_steering,
    views,
)
from ithaca.ultragoal.operation import Context

Handler = Callable[[Context, dict[str, Any]], dict[str, Any]]

HANDLERS: dict[str, Handler] = {
    "set": planning.set_phase,
    "set_stories": story_set.set_stories,
    "reorder_stories": story_set.reorder_stories,
    "confirm_story": story_set.confirm_stories,
    "confirm_all_stories": story_set.confirm_stories,
    "add_story": story_steering.add_story,
    "revise_story": story_steering.revise_story,
    "retire_story": story_steering.retire_story,
    "split_story": story_steering.split_story,
    "run_story_validator": story_runs.run_story_validator,
    "record_story_verdict": objective.record_story_verdict,
    "set_verdict": objective.set_verdict,
    "request_complete": objective.request_complete,
    "review_ticket": review.review_ticket,
    "submit_review": review.submit_review,
    "record_comment_resolution": review.record_comment_resolution,
    "dismiss_review_finding": review.dismiss_review_finding,
    "approve_review_dispatch_renewal": review.approve_review_dispatch_renewal,
    "resume_pursuit": levers.resume_pursuit,
    "set_budget_limited": levers.set_budget_limited,
    "set_blocked": levers.set_blocked,
    "adopt": levers.adopt,
}


class UltragoalService:
    """Ultragoal pursuits of one project, keyed by host session."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config

    def dispatch(self, arguments: Any) -> dict[str, Any]:
        """``ultragoal {operation, session?, …}`` as the MCP tool receives it (agent)."""
        return self.perform(arguments, actor="agent", base_dir=self.project.root)

    def perform(
        self,
        arguments: Any,
        *,
        actor: str,
        base_dir: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Run one operation as ``actor``; relative evidence paths start at ``base_dir``
        (default: the project root)."""
        operation, session, fields = inputs.parse(arguments)
        if operation in authority.HOOK_OPERATIONS and actor != "hook":
            raise Refused(
                "AUTHORITY_HOOK_ONLY",
                "the PreToolUse hook claims review dispatches when a reviewer is started;"
                " never call it yourself",
                {"operation": operation},
            )
        if operation in authority.USER_OPERATIONS and actor not in ("user", "system"):
            raise Refused(
                "AUTHORITY_USER_ONLY",
                f"only the user may run `ithaca ultragoal {operation.replace('_', '-')}`,"
                " in their own terminal: present the command to them",
                {"operation": operation},
            )
        ctx = Context(
            project=self.project,
            store=self.store,
            config=self.config,
            actor=actor,
            base_dir=base_dir or self.project.root,
            env=os.environ if env is None else env,
            operation=operation,
            inputs=fields,
        )
        ctx.resolve_session(session)
        if operation in authority.READ_OPERATIONS:
            return self._read(ctx, operation)
        if operation == "claim_review_dispatch":
            return self.claim_review_dispatch(ctx.session_id)
        return HANDLERS[operation](ctx, fields)

    # --- hook-facing ---------------------------------------------------------------------

    def claim_review_dispatch(
        self, session_id: str, *, nonce_in_prompt: bool = False
    ) -> dict[str, Any]:
        """The PreToolUse claim in its own transaction (``lifecycle.claim_review_dispatch``
        is the same inside the dispatcher's)."""
        with self.store.write() as tx:
            return lifecycle.claim_review_dispatch(
                tx, session_id, now=clock.now(), nonce_in_prompt=nonce_in_prompt
            )

    def seed(self, session_id: str, *, user_typed: bool) -> dict[str, Any]:
        """Seed a pristine pursuit for ``session_id`` (``lifecycle.seed``)."""
        with self.store.write() as tx:
            return lifecycle.seed(
                tx,
                session_id,
                now=clock.now(),
                max_iterations=self.config["ultragoal"]["max_iterations_default"],
                user_typed=user_typed,
            )

    def pursuits(self) -> list[dict[str, Any]]:
        """Every session's active pursuit, latest first (``views.overview``)."""
        with self.store.read() as conn:
            return views.overview(conn)

    def collect_garbage(self) -> list[str]:
        """Reap idle pursuits and reconcile the pursuing markers; returns reaped ids."""
        with self.store.write() as tx:
            reaped = lifecycle.reap(tx, clock.now())
        lifecycle.reconcile_markers(self.store.connection(), self.project.runtime)
        return reaped

    def state_digest(self, session_id: str) -> str:
        return records.state_digest(self.store.connection(), session_id)

    # --- reads ---------------------------------------------------------------------------

    def _read(self, ctx: Context, operation: str) -> dict[str, Any]:
        if operation == "get_review_result":
            return review.result(ctx)
        with self.store.read() as conn:
            if operation == "status":
                return views.status(conn, ctx.session_id, ctx.roots)
            if operation == "list_others":
                return {"others": views.others(conn, ctx.session_id, ctx.now)}
            row = records.load(conn, ctx.session_id)
            if operation == "get":
                shown = None if row is None or not row["active"] else views.state(conn, row)
                return {"state": shown}
            stories = [] if row is None else records.stories(conn, ctx.session_id)
            if operation == "serialize_requirements":
                return {"requirements": "" if row is None else contract.requirements(row, stories)}
            if row is None or not row["active"]:
                raise NotFound("NO_ACTIVE_PURSUIT", "this session has no active pursuit to review")
            return contract.review_context(row, stories)
