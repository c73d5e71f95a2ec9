"""``lean_dojo_v2.lean_dojo.data_extraction``: the dataset generation (``dataset``)."""
