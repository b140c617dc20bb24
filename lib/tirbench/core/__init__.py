"""The ground floor: machine and targets, the TIR pipeline and build/export, generated CUDA, paths, errors, atomic
writes, progress bars. Imports nothing else of tirbench."""
