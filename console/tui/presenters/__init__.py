"""What the console shows of a running operation, folded from core's typed events (pure: no textual here).

    bench_live.py  a running benchmark queue: one row per level and repeat of every queued sweep
    tune_board.py  a running tune: one row per setup, the current trial, the stage, the standings
    roll_board.py  a rolling change: one row per host (its batch, where it is, its outcome), the batch under way

Only the console renders these (the CLI prints the events as they come), so they live beside its screens.
"""
