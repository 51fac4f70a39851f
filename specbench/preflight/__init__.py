"""``specbench preflight``: the account read (read-only) for what the deploy needs, before it starts.

``checks.py`` holds one small pure function per check over API responses, ``target.py`` derives
what to check from the configuration (and cdk.out's manifest), ``account.py`` is the thin layer
that calls AWS. Not in the Job's zip: only a checkout runs it (it reads the configuration).
"""
