# Forks writers, kills them with SIGKILL; a few seconds.
set_tests_properties(test_db_proc PROPERTIES TIMEOUT 300)
