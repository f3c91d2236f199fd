from difftest.cli import main

main()
