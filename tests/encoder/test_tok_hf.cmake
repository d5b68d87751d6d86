# test_tok_hf runs npm's @huggingface/tokenizers (node, tests/encoder/hf_tokenizers) as its
# reference: loading the 33 MB Gemma file there takes 5-30 s on a busy 2-core machine.
target_link_libraries(test_tok_hf PRIVATE PkgConfig::JANSSON Threads::Threads)
set_tests_properties(test_tok_hf PROPERTIES LABELS "unit;golden" TIMEOUT 600)
