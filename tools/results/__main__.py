import sys

from tools.results.cli import main

if __name__ == '__main__':
    main(sys.argv[1:], signals=True)
