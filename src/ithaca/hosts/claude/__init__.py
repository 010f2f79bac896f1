"""Claude Code: the hook adapter (on the hook path) and the installer."""
