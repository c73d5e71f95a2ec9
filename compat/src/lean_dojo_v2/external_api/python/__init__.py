"""``lean_dojo_v2.external_api.python``: ``server`` (the ASGI ``app``) and ``leanprogress``
(``LeanProgressScorer``)."""
