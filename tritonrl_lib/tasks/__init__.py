"""Tasks: the Task contract, the op-family vocabulary, the built-in suite and the task loaders."""

from .builtin_suite import BUILTIN_DIR, SIZES, SuiteEntry, load_builtin, load_manifest
from .families import FAMILIES, all_categories, all_families, category_of, level_of_category
from .kb_format import (
    FormatProblem,
    KBModule,
    TaskFormatError,
    check_kb_source,
    init_constant_names,
    module_constants,
    parse_kb_source,
    rewrite_constants,
)
from .loaders import (
    KERNELBENCH_COLUMNS,
    TaskSourceError,
    kernelbench_level_dirs,
    load_kernelbench_dataset,
    load_kernelbench_dir,
    load_tasks,
)
from .task import Task

__all__ = [
    "BUILTIN_DIR", "SIZES", "SuiteEntry", "load_builtin", "load_manifest",
    "FAMILIES", "all_categories", "all_families", "category_of", "level_of_category",
    "FormatProblem", "KBModule", "TaskFormatError", "check_kb_source", "init_constant_names",
    "module_constants", "parse_kb_source", "rewrite_constants",
    "KERNELBENCH_COLUMNS", "TaskSourceError", "kernelbench_level_dirs", "load_kernelbench_dataset",
    "load_kernelbench_dir", "load_tasks",
    "Task",
]
