from allocwatch.cli import run

run()
