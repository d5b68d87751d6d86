# test_default_model runs the bundled model through the encoder: C vs PyTorch parity.
target_link_libraries(test_default_model PRIVATE cdb_encoder)
set_tests_properties(test_default_model PROPERTIES LABELS "golden;model")
