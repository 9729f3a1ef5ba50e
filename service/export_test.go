package service

// Test hooks: what the tests of package service_test may see inside.

// Waiting returns how many purchases of product wait in this instance's
// lines (not yet taken into a hold).
func (s *Seckill) Waiting(product int64) int {
	s.lines.mu.Lock()
	defer s.lines.mu.Unlock()
	n := 0
	for key, l := range s.lines.m {
		if key.product == product {
			n += len(l.waiting)
		}
	}
	return n
}
