"""benchctl's hooks for the agent CLIs: hook.py runs in the sandbox, host.py applies the policies."""
