# test_tok_spm trains SentencePiece vocabularies with spm_train and runs its oracle
# (tok_spm_oracle.py) with /usr/bin/python3 + python3-sentencepiece at test time; both
# must be installed (scripts/setup.sh): a missing tool fails the test.
target_link_libraries(test_tok_spm PRIVATE PkgConfig::JANSSON)
set_tests_properties(test_tok_spm PROPERTIES LABELS "unit;golden" TIMEOUT 300)
