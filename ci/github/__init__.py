"""GitHub operations: the API client, the job around a run, the registry and board, secrets, releases, the runner service."""
