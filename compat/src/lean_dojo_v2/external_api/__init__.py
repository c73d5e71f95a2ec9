"""``lean_dojo_v2.external_api``: LeanDojo-v2's model server for Lean Copilot, on leanloop's
(``leanloop.serve``): ``uvicorn lean_dojo_v2.external_api.python.server:app --port 23337``."""
