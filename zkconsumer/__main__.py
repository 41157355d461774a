from zkconsumer.cli import main

main()
