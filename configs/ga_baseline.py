"""The classical baseline: a genetic algorithm evolves the 76 weights of a linear shogi
evaluation (the study's 74 features and two of hanging pieces) to agree with the
teacher's moves at one ply (docs/classical.md).

    python evolve.py --config configs/ga_baseline.py[:smoke] --workdir runs/ga [--config.FIELD=VALUE]

The default is the study's run: 100 genomes, 200 generations, crossover 0.75, mutation
0.005 a bit, the best genome kept; 10 bits for each major weight (the study's 24 and the
two hanging-piece ones) and 6 for each of the 50 minor ones (560 bits; the study's 540). ``smoke``: a tiny run for tests (seconds after its compile).
"""

import ml_collections

PRESETS = ("study", "smoke")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.name = "ga_baseline"
    c.seed = 0  # the population, selection, crossover and mutation derive from it
    c.population = 100  # genomes per generation
    c.generations = 200
    c.crossover_rate = 0.75  # chance that a pair of parents is crossed (single point)
    c.mutation_rate = 0.005  # chance that a bit of an offspring flips
    c.elitism = 1  # the best genomes copied unchanged into the next generation
    c.major_bits = 10  # Gray-coded bits of each of the 26 major weights (unsigned)
    c.minor_bits = 6  # bits of each of the 50 minor weights (signed)
    c.teacher_set = ""  # TSV of labelled positions; "" = the shipped data/teacher.tsv
    c.fit_positions = 0  # use the first N positions of the fitting part; 0 = all
    c.eval_every = 10  # generations between held-out agreements of the best genome
    c.save_every = 10  # generations between saves of the population (and on SIGTERM)
    arg = arg or "study"
    if arg not in PRESETS:
        raise ValueError(f"unknown preset {arg!r}; choose from {', '.join(PRESETS)}")
    if arg == "smoke":
        c.population = 12
        c.generations = 6
        c.fit_positions = 200
        c.eval_every = 2
        c.save_every = 2
    return c
