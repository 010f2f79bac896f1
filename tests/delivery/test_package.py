"""The package surface: lazy exports, the published tool schema, and the migration."""

from __future__ import annotations

import subprocess
import sys

from ithaca.app import IthacaProject
from ithaca.kernel import canon
from ithaca.kernel.migrations import MIGRATIONS


def test_importing_the_package_loads_no_service() -> None:
    code = (
        "import sys, ithaca.delivery\n"
        "assert 'ithaca.delivery.service' not in sys.modules\n"
        "assert ithaca.delivery.DeliveryService.__name__ == 'DeliveryService'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_record_tool_fits_its_share_of_the_tools_list_budget() -> None:
    from ithaca.delivery.records.tool import RECORD_DESCRIPTION, RECORD_SCHEMA

    tool = {"name": "record", "description": RECORD_DESCRIPTION, "inputSchema": RECORD_SCHEMA}
    assert len(canon.canonical(tool)) <= 1024


def test_the_delivery_migration_creates_its_tables(project: IthacaProject) -> None:
    assert [m.name for m in MIGRATIONS if m.name.startswith("delivery.")] == [
        "delivery.initial",
        "delivery.ledger",
        "delivery.sessions",
    ]
    tables = {
        row[0]
        for row in project.store.connection().execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'delivery_%'"
        )
    }
    assert tables == {
        "delivery_idempotency",
        "delivery_baselines",
        "delivery_changes",
        "delivery_decisions",
        "delivery_tasks",
        "delivery_circuits",
        "delivery_artifacts",
        "delivery_checkpoints",
        "delivery_fs_intents",
        "delivery_reconciliations",
        "delivery_files",
        "delivery_ledger_base",
        "delivery_sessions",
        "delivery_packets",
        "delivery_plan_runs",
        "delivery_plan_run_tasks",
    }
