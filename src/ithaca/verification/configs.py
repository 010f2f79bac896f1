"""The files that configure each test runner: what a turn may not change unseen.

A runner's configuration decides which tests run and how (``conftest.py`` can deselect
every test, a ``sitecustomize.py`` or ``.pth`` file runs code before any test, a module
named like the runner shadows it), so the critic captures these files when a turn begins
and holds the turn to them (``verification.turn``). Patterns are POSIX paths relative to
the project's root: ``**/name`` matches at any depth, ``folder/**`` everything under a
folder at the root. ``CAPTURED`` is every runner's, so the hook captures them without
finding the runner first. Plain data: the hook imports it.
"""

_SHIMS = ("**/sitecustomize.py", "**/usercustomize.py", "**/*.pth")
PYTEST_CONFIG = (
    "**/conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    *_SHIMS,
    "pytest.py",
    "pytest/**",
    "_pytest/**",
    "py.py",
    "pluggy/**",
)
UNITTEST_CONFIG = ("unittest.py", "unittest/**", *_SHIMS)
TOX_CONFIG = ("tox.ini", "tox.toml", *PYTEST_CONFIG[3:])
NOX_CONFIG = ("noxfile.py", *PYTEST_CONFIG)
_JS_RUNNERS = (
    "jest.config.*",
    "vitest.config.*",
    "vitest.workspace.*",
    "vite.config.*",
    ".mocharc*",
    "karma.conf.*",
    "ava.config.*",
    "playwright.config.*",
    ".npmrc",
)
NPM_CONFIG = ("package.json", *_JS_RUNNERS)
PNPM_CONFIG = (*NPM_CONFIG, "pnpm-workspace.yaml", ".pnpmfile.cjs")
YARN_CONFIG = (*NPM_CONFIG, ".yarnrc", ".yarnrc.yml")
CARGO_CONFIG = (
    "**/Cargo.toml",
    ".cargo/config",
    ".cargo/config.toml",
    "rust-toolchain",
    "rust-toolchain.toml",
)
GO_CONFIG = ("go.mod", "go.work")
MAKE_CONFIG = ("Makefile", "makefile", "GNUmakefile", "**/*.mk")

CAPTURED = tuple(
    dict.fromkeys(
        (
            *PYTEST_CONFIG,
            *UNITTEST_CONFIG,
            *TOX_CONFIG,
            *NOX_CONFIG,
            *PNPM_CONFIG,
            *YARN_CONFIG,
            *CARGO_CONFIG,
            *GO_CONFIG,
            *MAKE_CONFIG,
        )
    )
)

# Files shared with other tools, of which only these sections configure a runner: an edit
# elsewhere in them (a dependency, a linter's settings) changes no test run.
SHARED = {
    "pyproject.toml": ("tool.pytest", "tool.tox"),
    "setup.cfg": ("tool:pytest",),
}
