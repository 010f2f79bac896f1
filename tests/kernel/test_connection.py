"""Opening SQLite for hooks: the same engine, without the imports a hook cannot afford."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from ithaca.kernel import connection
loaded_early = sorted(m for m in ("functools", "collections", "types") if m in sys.modules)
conn = connection.connect(sys.argv[1])
conn.execute("CREATE TABLE t (n INTEGER)")
for n in range(300):  # the same statement again and again goes through the statement cache
    conn.execute("INSERT INTO t VALUES (?)", (n % 7,))
total = conn.execute("SELECT sum(n) FROM t").fetchone()[0]
import functools
print(loaded_early, total, hasattr(functools, "partial"), hasattr(functools, "reduce"))
"""


def test_sqlite_opens_without_loading_functools_and_the_real_one_loads_later(tmp_path):
    done = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, str(tmp_path / "state.db")],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": ":".join(sys.path)},
    )
    expected = sum(n % 7 for n in range(300))
    assert done.stdout.split() == ["[]", str(expected), "True", "True"]


def test_the_light_namedtuple_behaves_like_the_standard_one():
    from collections import namedtuple as standard

    from ithaca.kernel.tuples import namedtuple as light

    for factory in (standard, light):
        point = factory("Point", "x y z", defaults=(0,))
        made = point(1, y=2)
        assert (made, made.x, made.z, made._fields) == ((1, 2, 0), 1, 0, ("x", "y", "z"))
        assert made._replace(z=5) == (1, 2, 5) and repr(made) == "Point(x=1, y=2, z=0)"
        for bad in ((), (1, 2, 3, 4)):
            try:
                point(*bad)
            except TypeError:
                continue
            raise AssertionError(f"{factory} accepted {bad}")
