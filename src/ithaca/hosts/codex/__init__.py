"""Codex: the hook adapter (on the hook path), its hook trust, and the installer."""
