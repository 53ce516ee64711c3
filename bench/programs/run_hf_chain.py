"""Run :mod:`hf_chain` (the module beside this script), so that its phases can be hooked by
``verifyprof capture --hook hf_chain:ChainDecoder.propose=draft ...``."""

import sys
import warnings

import hf_chain

warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)

if __name__ == "__main__":
    sys.exit(hf_chain.main())
