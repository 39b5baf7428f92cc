"""What the console shows of a running operation, folded from core's typed events (pure: no textual here).

    bench_live.py  a running benchmark queue: one row per level and repeat of every queued sweep
    tune_board.py  a running tune: one row per setup, the current trial, the stage, the standings

Only the console renders these (the CLI prints the events as they come), so they live beside its screens.
"""
