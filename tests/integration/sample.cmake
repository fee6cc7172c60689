rbpeek_matrix_test(sample test_sample.py)
