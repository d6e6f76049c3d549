"""The default-workload generator's code (its text is in ``scripts/default_workload/``).

``data`` loads the text and tables; ``names`` has English/identifier helpers; ``codegen`` and ``modules``
write a made-up library's source and tests; ``repo`` holds one session's virtual repository; ``plan``
chooses a session's steps; ``outputs`` renders tool messages and replies; ``session_base`` and the
``steps_*`` mixins play the steps; ``session.Session`` runs a whole session. ``scripts/make_default_workload.py``
is the command.
"""
