-- Reserved: tern applies migrations without gaps, and this number belongs
-- to a change made beside migration 010. Replace this file with it.
SELECT 1;
