"""``ithaca import``: delivery changes and task contracts brought in from a peer tool.

Each peer has its own reader — ``ultra`` (an Ultra Builder Pro ``.ultra/`` project),
``taskmaster`` (Task Master's ``tasks.json``), ``openspec`` (an OpenSpec ``changes/``
folder) and ``speckit`` (spec-kit's ``specs/<feature>/tasks.md``) — which turns the
peer's files into the shared model of ``shared``: units (one per Ithaca change) holding
tasks whose dependencies name the peer's ids. ``shared`` also tells the formats apart
and settles the tasks (dependencies resolved to Ithaca ids, cycles refused, an order in
which every task follows what it needs). ``tool`` plans the import against the store and
runs it through ``DeliveryService.record`` and ``checkpoint``, so an import is nothing
but the journaled, idempotent record entries an agent could have sent.
"""
