import sys

from cuda_llm_lsp.cli import main

sys.exit(main())
