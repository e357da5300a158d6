from eosctl.cli import run

run()
