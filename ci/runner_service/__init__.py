"""A self-hosted runner that lasts: register an ephemeral runner, let it take one job, clean up, register again.

`guide-guard-runner-service` (or `python -m ci.runner_service`) is the loop; `ci.runner_service.github` asks
GitHub's REST API for each registration token, with a fine-grained token or a GitHub App.
"""
