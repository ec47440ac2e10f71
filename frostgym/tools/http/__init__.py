"""The replayed HTTP tool world behind ``frostgym/ToolsHTTP-v0``.

- ``apis``: six deterministic fixture APIs (weather, currency, flights, calendar, units,
  parcels) as pure functions of the request; ``fixture_server`` serves them on loopback.
- ``clients``: one ``httpx`` function per endpoint, with OpenAI tool schemas (``TOOLS``).
- ``replay``: the vcrpy configuration (matching, secret filters) and ``run_call``, which
  answers a tool call from the committed cassettes, or with a ``replay_miss`` error.
- ``record``: ``record_cassettes(out_dir)`` and ``check_cassettes()``
  (``python -m frostgym.tools.http.record [--check]``).
- ``tasks``: the task set (``fixtures/tools_http/tasks.json``, written by ``taskgen``).

Submodules are imported where used, so importing this package stays cheap.
"""
