"""Delivery's input schemas: the dialect and checker (``dialect``), the id patterns
(``ids``) and the ``record`` data schema of every (kind, action) (``record``)."""
