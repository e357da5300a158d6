from eosctl.cli import main

main()
