"""The Actions job around a run: what a workflow does before the harness starts and after it ends.

`guide-guard-job prepare` turns the job's inputs into the run's deadline and directories, `guide-guard-job stop`
stops a harness the runner cannot signal (a cancelled container job), `guide-guard-job hand-back` gives what the
container's root wrote back to the runner's user. The command line is ci.job.cli.
"""
