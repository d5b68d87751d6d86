# test_siglip: SigLIP / SigLIP2 FixRes in both layouts against committed PyTorch
# fixtures (scripts/make_siglip_fixtures.py), PIL's squash resize, the NaFlex refusal.
# Writes a config with jansson.
target_link_libraries(test_siglip PRIVATE PkgConfig::JANSSON)
set_tests_properties(test_siglip PROPERTIES LABELS "unit;golden")
