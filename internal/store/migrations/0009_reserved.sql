-- Reserved for another branch's migration 0009; a no-op that keeps the
-- versions gapless until it is merged, and is then deleted.
SELECT 1;
