"""Measurement, never training: the teacher set (``teacher``), agreement of networks and
searches with it (``agreement``) and the paper's diversity measure (``diversity``).

Nothing here imports ``az.train``; training imports these modules to log their measures.
"""
