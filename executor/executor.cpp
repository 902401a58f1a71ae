// executor/: see executor/session.h.
