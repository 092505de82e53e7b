"""Training data: KernelBook loading, difficulty labels, the offline SFT generator, the family split.

    kernelbook.py   KernelBook rows -> KernelBench tasks with a ModelNew solution
    difficulty.py   the source's Level 1/2/3 heuristics, with reasons
    templates/      op templates: reference + Triton solution per op family, varied in shape/dtype/style
    generate.py     verified, deduplicated SFT examples from the templates
    split.py        train / held-out split by op family
    records.py      the jsonl record formats (SFTExample, DifficultyRecord) and their readers/writers
    stage.py        the data stage 01_data runs: everything above, written through RunPaths
"""

from .difficulty import DifficultyLabel, agreement, difficulty_counts, label_difficulty, label_task, label_tasks
from .generate import GenerationStats, generate_sft_examples, generator_version, make_candidate, to_sft_example
from .kernelbook import (COLUMNS as KERNELBOOK_COLUMNS, KernelBookLoad, NormaliseError, load_kernelbook,
                         normalise_row, normalise_rows, read_kernelbook_rows)
from .records import (DifficultyRecord, SFTExample, read_difficulty_labels, read_json, read_jsonl,
                      read_sft_examples, write_json, write_jsonl)
from .split import Split, heldout_tasks, leaked_family, make_split, n_heldout, train_tasks
from .stage import DataResult, build_data, data_is_current, data_settings

__all__ = [
    "DifficultyLabel", "agreement", "difficulty_counts", "label_difficulty", "label_task", "label_tasks",
    "GenerationStats", "generate_sft_examples", "generator_version", "make_candidate", "to_sft_example",
    "KERNELBOOK_COLUMNS", "KernelBookLoad", "NormaliseError", "load_kernelbook", "normalise_row", "normalise_rows",
    "read_kernelbook_rows",
    "DifficultyRecord", "SFTExample", "read_difficulty_labels", "read_json", "read_jsonl", "read_sft_examples",
    "write_json", "write_jsonl",
    "Split", "heldout_tasks", "leaked_family", "make_split", "n_heldout", "train_tasks",
    "DataResult", "build_data", "data_is_current", "data_settings",
]
