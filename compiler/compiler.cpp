// compiler/: see compiler/compiler.h.
